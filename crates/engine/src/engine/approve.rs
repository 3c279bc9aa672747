//! An approver's decision on a session waiting for sign-off (`docs/engine.md` §6.2): approve,
//! send back with a note, or waive one failed check's finding. Not a tool: the facilitator's
//! view and `rimthan sessions approve|send-back|waive` call it with the approver's verified
//! identity. Like every change it goes through the one compare-and-swap loop, so two approvers
//! racing make one transition each, in turn, and never the same one twice.

use super::{
    Engine,
    access::Door,
    transact::{Ruling, stored_revision},
};
use crate::{
    error::EngineError,
    model::{
        approval::{
            Approver, Decision, DecisionRequest, DecisionResult, Identity, MAX_NOTE_BYTES,
            unknown_session,
        },
        audit::{AuditDecision, Operation, Outcome},
        session::now_rfc3339,
    },
    rules::{transition, view::Pinned},
};
use tracing::Instrument as _;

impl Engine {
    /// Records `req` by `approver`, or refuses it with a code and changes nothing.
    pub async fn decide(
        &self,
        req: DecisionRequest,
        approver: &Approver,
    ) -> Result<DecisionResult, EngineError> {
        let tool = match req.decision {
            Decision::Approve { .. } => Operation::ApproveStep,
            Decision::SendBack { .. } => Operation::SendBackStep,
            Decision::Waive { .. } => Operation::WaiveFinding,
        };
        let door = Door::Approver {
            session: &req.session,
            approver,
        };
        let refused = |rejected: crate::model::payload::Rejected| DecisionResult::Refused {
            failure: rejected
                .failures
                .into_iter()
                .next()
                .unwrap_or_else(|| unknown_session(req.session.as_str())),
        };
        let span =
            super::trace::decision_span(tool.as_str(), approver.identity != Identity::Asserted);
        let decided = self.transact(door, refused, |opened| {
            let session = opened.session();
            let pinned = Pinned::resolve(opened.release(), session, &self.policies)?;
            let (next, decision) =
                match transition::decided(&pinned, session, &req, approver, &now_rfc3339()) {
                    Ok(decided) => decided,
                    Err(failure) => {
                        let mut audit = self.audit(
                            tool,
                            Some(session),
                            Outcome::Rejected,
                            Some(&approver.principal),
                        );
                        audit.codes = vec![failure.code];
                        audit.decision = Some(asked(&req, approver));
                        return Ok(Ruling::Answer(DecisionResult::Refused { failure }, audit));
                    }
                };
            let mut audit = self.audit(
                tool,
                Some(&next),
                next.status.into(),
                Some(&approver.principal),
            );
            audit.decision = Some(decision);
            let pending = next.approval.as_ref();
            let needed = pinned
                .workflow
                .steps()
                .iter()
                .find(|s| s.doc().id == req.step)
                .and_then(|s| s.doc().approval.as_ref())
                .map_or(0, |a| a.approvers);
            // The approvals still standing: those of the waiting sign-off, those that
            // completed it, or none after a send-back.
            let approvals = match pending {
                Some(p) => p.approvals.len(),
                None => next
                    .signoffs
                    .get(&req.step)
                    .map_or(0, |s| s.approvals.len()),
            };
            let answer = DecisionResult::Recorded {
                status: next.status,
                revision: stored_revision(session),
                approvals,
                approvals_needed: needed,
                unwaived: pending.map_or(0, |p| p.waivable.len()),
            };
            Ok(Ruling::Move {
                next: Box::new(next),
                audit,
                answer,
            })
        });
        let done = decided.instrument(span.clone()).await?;
        super::trace::decided(&span, &done.answer);
        Ok(done.answer)
    }
}

/// What a refused decision asked for, as its audit entry keeps it: the note or reason too
/// (cut to [`MAX_NOTE_BYTES`] where it was refused for its length), so a refusal loses nothing a
/// person wrote.
fn asked(req: &DecisionRequest, approver: &Approver) -> AuditDecision {
    let kept = |text: &str| {
        let kept = &text[..text.floor_char_boundary(MAX_NOTE_BYTES)];
        Some(kept.to_owned()).filter(|t| !t.trim().is_empty())
    };
    let mut record = AuditDecision {
        step: req.step.to_string(),
        asserted: approver.identity == Identity::Asserted,
        ..AuditDecision::default()
    };
    match &req.decision {
        Decision::Approve { note } => record.note = note.as_deref().and_then(kept),
        Decision::SendBack { note } => record.note = kept(note),
        Decision::Waive {
            check,
            rule,
            path,
            reason,
        } => {
            record.note = kept(reason);
            record.check_id = Some(check.to_string());
            record.rule = kept(rule);
            record.path = kept(path);
        }
    }
    record
}
