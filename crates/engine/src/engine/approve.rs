//! An approver's decision on a session waiting for sign-off (`docs/engine.md` §6.2): approve,
//! send back with a note, or waive one failed check's finding. Not a tool: the facilitator's
//! view and `rimthan sessions approve|send-back|waive` call it with the approver's verified
//! identity. Like every change it is a compare-and-swap on the session's revision, so two
//! approvers racing make one transition each, in turn, and never the same one twice.

use super::{Engine, MAX_ATTEMPTS, submit::advance};
use crate::{
    error::EngineError,
    model::approval::{
        Approver, Decision, DecisionRequest, DecisionResult, MAX_NOTE_BYTES, Waiver,
        unknown_session,
    },
    model::audit::{AuditDecision, AuditEntry, Operation, Outcome},
    model::codes::{Code, Failure},
    model::session::{Finding, Session, SignedOff, Status, now_rfc3339},
    rules::approval::{may_decide, note},
    rules::view::Pinned,
};

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
        for _ in 0..MAX_ATTEMPTS {
            let session = self.store.load_session(&req.session).await?;
            // Another organization's session answers as no session at all, and its chain
            // records nothing of the attempt.
            let Some(session) = session.filter(|s| approver.may_know(s.principal.as_ref())) else {
                let failure = unknown_session(req.session.as_str());
                return Ok(DecisionResult::Refused { failure });
            };
            let release = self.pinned_release(&session)?;
            let pinned = Pinned::resolve(&release, &session, &self.policies)?;
            let (next, decision) = match judge(&pinned, &session, &req, approver) {
                Ok(change) => change,
                Err(failure) => {
                    let mut audit = self.audit(
                        tool,
                        Some(&session),
                        Outcome::Rejected,
                        Some(&approver.principal),
                    );
                    audit.codes = vec![failure.code];
                    audit.decision = Some(asked(&req));
                    self.store.append_audit(&audit).await?;
                    return Ok(DecisionResult::Refused { failure });
                }
            };
            let mut next = next;
            next.revision = session.revision + 1;
            let mut audit: AuditEntry = self.audit(
                tool,
                Some(&next),
                next.status.into(),
                Some(&approver.principal),
            );
            audit.decision = Some(decision);
            if self
                .store
                .update_session(session.revision, &next, &audit)
                .await?
            {
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
                return Ok(DecisionResult::Recorded {
                    status: next.status,
                    revision: next.revision,
                    approvals,
                    approvals_needed: needed,
                    unwaived: pending.map_or(0, |p| p.waivable.len()),
                });
            }
        }
        Err(EngineError::Contended {
            attempts: MAX_ATTEMPTS,
        })
    }
}

/// What a refused decision asked for, as its audit entry keeps it: the note or reason too
/// (cut to [`MAX_NOTE_BYTES`] where it was refused for its length), so a refusal loses nothing a
/// person wrote.
fn asked(req: &DecisionRequest) -> AuditDecision {
    let kept = |text: &str| {
        let kept = &text[..text.floor_char_boundary(MAX_NOTE_BYTES)];
        Some(kept.to_owned()).filter(|t| !t.trim().is_empty())
    };
    let mut record = AuditDecision {
        step: req.step.to_string(),
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

/// The session after `req`, and what the audit log records of it; or the refusal.
fn judge(
    pinned: &Pinned<'_>,
    session: &Session,
    req: &DecisionRequest,
    approver: &Approver,
) -> Result<(Session, AuditDecision), Failure> {
    let pending = session
        .approval
        .as_ref()
        .filter(|p| session.status == Status::AwaitingApproval && p.step == req.step)
        .ok_or_else(|| {
            Failure::new(
                Code::ApprovalNotPending,
                format!(
                    "the session is {}, not waiting for sign-off of step {}",
                    session.status.as_str(),
                    req.step
                ),
            )
            .with("status", session.status.as_str())
        })?;
    let approval = pinned
        .active_step(session)
        .and_then(|s| s.doc().approval.as_ref())
        .ok_or_else(|| {
            Failure::new(
                Code::ApprovalNotPending,
                "the active step asks for no sign-off",
            )
        })?;
    let basis = may_decide(approval, approver, session.principal.as_ref())?;
    if req.revision != session.revision {
        return Err(Failure::new(
            Code::ApprovalStale,
            "the session changed since you looked at it; reload it and decide again",
        )
        .with("revision", session.revision));
    }
    for (path, read) in &req.expected {
        let now = pending.outputs.get(path).map(|o| o.sha256);
        if now != Some(*read) {
            let now = now.map_or_else(|| "none".to_owned(), |d| d.to_string());
            return Err(Failure::new(
                Code::ApprovalContentChanged,
                format!(
                    "{path} is not the output you read (sha256 {read}; it is {now} now): read it \
                     again and decide"
                ),
            )
            .with("path", path.as_str())
            .with("expected_sha256", read.to_string())
            .with("sha256", now));
        }
    }
    let now = now_rfc3339();
    let mut next = session.clone();
    let mut record = AuditDecision {
        step: req.step.to_string(),
        ..AuditDecision::default()
    };
    let subject = &approver.principal.subject;
    let mine = |p: &crate::model::approval::PendingApproval| {
        p.approvals.iter().any(|a| &a.subject == subject)
    };
    match &req.decision {
        Decision::Approve { note: text } => {
            if mine(pending) {
                return Err(Failure::new(
                    Code::ApprovalAlreadyGiven,
                    "you already approved this step; it needs another person's approval",
                ));
            }
            if !pending.waivable.is_empty() {
                return Err(Failure::new(
                    Code::ApprovalFindingsUnwaived,
                    format!(
                        "{} failed check finding(s) must be waived, or the step sent back, \
                         before it can be approved",
                        pending.waivable.len()
                    ),
                ));
            }
            let text = note(text.as_deref(), false, "note")?;
            record.note.clone_from(&text);
            let pending = next.approval.as_mut().expect("checked above");
            pending.approvals.push(crate::model::approval::Signoff {
                subject: subject.clone(),
                organization: approver.principal.organization.clone(),
                basis: Some(basis),
                at: now.clone(),
                note: text,
            });
            if pending.approvals.len() >= approval.approvers as usize {
                let pending = next.approval.take().expect("checked above");
                next.signoffs.insert(
                    pending.step.clone(),
                    SignedOff {
                        approvals: pending.approvals,
                        waivers: pending.waivers,
                    },
                );
                advance(&mut next, session, pending.outputs, pinned, &now);
            }
        }
        Decision::SendBack { note: text } => {
            let text = note(Some(text), true, "note saying what to change")?
                .expect("a required note is present");
            record.note = Some(text.clone());
            next.approval = None;
            next.status = Status::Revise;
            next.revise_rounds += 1;
            next.findings = vec![Finding {
                validator_id: String::new(),
                check_id: None,
                rule: None,
                line: None,
                severity: "error".into(),
                message: format!("Sent back by {subject}: {text}"),
                path: None,
                pointer: None,
            }];
        }
        Decision::Waive {
            check,
            rule,
            path,
            reason,
        } => {
            if !approval.waivable(check) {
                return Err(Failure::new(
                    Code::WaiverNotAllowed,
                    format!("this step allows no waiver of check {check}'s findings"),
                ));
            }
            let reason = note(Some(reason), true, "reason for the waiver")?
                .expect("a required reason is present");
            let matches = |f: &Finding| {
                f.check_id.as_deref() == Some(check.as_str())
                    && f.rule.as_deref() == Some(rule.as_str())
                    && f.path.as_deref() == Some(path.as_str())
            };
            let output = pending.outputs.get(path);
            let (true, Some(output)) = (pending.waivable.iter().any(matches), output) else {
                return Err(Failure::new(
                    Code::WaiverNotFound,
                    format!(
                        "no unwaived finding of check {check}, rule {rule} in {path} waits for sign-off"
                    ),
                ));
            };
            let waiver = Waiver {
                step: req.step.to_string(),
                check_id: check.to_string(),
                rule: rule.clone(),
                path: path.clone(),
                output_sha256: output.sha256,
                subject: subject.clone(),
                basis: Some(basis),
                reason: reason.clone(),
                at: now.clone(),
            };
            record.note = Some(reason);
            record.check_id = Some(waiver.check_id.clone());
            record.rule = Some(waiver.rule.clone());
            record.path = Some(waiver.path.clone());
            record.output_sha256 = Some(waiver.output_sha256.to_string());
            let pending = next.approval.as_mut().expect("checked above");
            // One waiver covers every finding of that check and rule in that output.
            pending.waivable.retain(|f| !matches(f));
            pending.waivers.push(waiver);
        }
    }
    // The checkpoint does not move: the participant's harness, holding the one its submission
    // returned, reads the decision with `rimthan.get_active_step` and goes on from there.
    next.last_change = None;
    next.updated_at = now;
    Ok((next, record))
}
