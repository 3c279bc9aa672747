//! The one place a session's stage changes (`docs/engine.md` §3): a start, a preparation, a
//! submission and an approver's decision each take the session as it was read and return the
//! session after it with what its audit entry records, or a refusal. Pure: no store, no clock
//! (the caller passes `now`), no key; the revision is not theirs to move
//! (`engine/transact.rs` stores every change one revision on).

use std::collections::BTreeMap;

use rimthan_registry::{Sha256Digest, VerifiedRelease, Workflow};

use crate::{
    model::{
        approval::{
            Approver, Decision, DecisionRequest, Identity, PendingApproval, Signoff, Waiver,
        },
        audit::{AuditDecision, Judgement},
        checks::CheckRecord,
        codes::{Code, Failure},
        request::{Report, RepositoryPolicy, Severity, Verdict},
        session::{
            AcceptedArtifact, Deadline, Finding, HostBinding, LastRequest, PlanRecord, Principal,
            Session, SessionId, SignedOff, Status, later_by, seconds_between,
        },
    },
    rules::{
        approval::{may_decide, note},
        view::Pinned,
    },
};

/// What a new session is made of: where it starts, for whom, under which policy.
pub(crate) struct Start<'a> {
    pub id: SessionId,
    pub release: &'a VerifiedRelease,
    pub workflow: &'a Workflow,
    pub host: HostBinding,
    pub principal: Option<&'a Principal>,
    pub policy: RepositoryPolicy,
    pub fingerprint: LastRequest,
}

/// A new session, at its first step.
pub(crate) fn started(start: Start<'_>, now: &str) -> Session {
    Session {
        id: start.id,
        revision: 0,
        seq: 0,
        release: start.release.id().clone(),
        workflow: start.workflow.doc().id.clone(),
        workflow_version: start.workflow.doc().version.clone(),
        host: start.host,
        principal: start.principal.cloned(),
        policy: start.policy,
        status: Status::Active,
        step_index: 0,
        plan: None,
        retired_plans: Vec::new(),
        ledger: Default::default(),
        attested: Default::default(),
        findings: Vec::new(),
        reports: Default::default(),
        report_rounds: Default::default(),
        host_attestation_sha256: None,
        last_change: Some(start.fingerprint),
        revise_rounds: 0,
        step_entered_at: Some(now.to_owned()),
        approval: None,
        deadline: deadline_of(start.workflow, 0, now),
        timer_events: Vec::new(),
        signoffs: Default::default(),
        sent_back_texts: Default::default(),
        created_at: now.to_owned(),
        updated_at: now.to_owned(),
    }
}

/// A preparation accepted: `plan` pending (replacing any plan before it), its outputs attested,
/// and for a setup step the host attestation's digest.
pub(crate) fn prepared(
    session: &Session,
    plan: &PlanRecord,
    host_attestation: Option<Sha256Digest>,
    fingerprint: LastRequest,
    now: &str,
) -> Session {
    let mut next = session.clone();
    if let Some(old) = next.plan.take() {
        next.retire(old.id);
    }
    next.attested
        .extend(plan.outputs.iter().map(|(p, a)| (p.clone(), a.sha256)));
    next.plan = Some(plan.clone());
    if host_attestation.is_some() {
        next.host_attestation_sha256 = host_attestation;
    }
    next.last_change = Some(fingerprint);
    next.updated_at = now.to_owned();
    next
}

/// A report set accepted against `plan`: the step goes to `revise` (a validator or a check
/// failed it), waits for sign-off, or moves on (to the next step, or completed).
pub(crate) fn submitted(
    pinned: &Pinned<'_>,
    session: &Session,
    plan: &PlanRecord,
    reports: &[Report],
    fingerprint: LastRequest,
    now: &str,
) -> (Session, Judgement) {
    let mut next = session.clone();
    let plan = plan.clone();
    next.plan = None;
    next.retire(plan.id.clone());
    next.reports.insert(plan.step.clone(), reports.to_vec());
    let failing: Vec<_> = reports
        .iter()
        .filter(|r| r.verdict == Verdict::Fail)
        .collect();
    next.record_round(&plan.step, now, reports, &plan.checks);
    let failed_checks: Vec<_> = plan.checks.iter().filter(|c| c.failed()).collect();
    let mut judgement = Judgement {
        step: plan.step.to_string(),
        step_index: session.step_index as u64,
        failed: failing.iter().map(|r| r.validator_id.clone()).collect(),
        seconds: None,
    };
    judgement.failed.sort();
    judgement.failed.dedup();
    let approval = pinned
        .workflow
        .steps()
        .get(session.step_index)
        .and_then(|s| s.doc().approval.as_ref());
    // Failed checks wait for an approver only when every one of them may be waived.
    let waivable = approval.is_some_and(|a| {
        failed_checks
            .iter()
            .all(|c| c.id.parse().is_ok_and(|id| a.waivable(&id)))
    });
    if !failing.is_empty() || (!failed_checks.is_empty() && !waivable) {
        next.status = Status::Revise;
        next.revise_rounds += 1;
        next.findings = check_findings(&failed_checks);
        next.findings.extend(findings_of(&failing));
    } else if let Some(approval) = approval {
        next.status = Status::AwaitingApproval;
        next.findings.clear();
        let previous_texts = next.sent_back_texts.remove(&plan.step).unwrap_or_default();
        next.approval = Some(PendingApproval {
            step: plan.step.clone(),
            outputs: plan.outputs,
            waivable: check_findings(&failed_checks)
                .into_iter()
                .filter(|f| f.severity == Severity::Error)
                .collect(),
            approvals: Vec::new(),
            waivers: Vec::new(),
            texts: plan.texts,
            previous_texts,
            requested_at: Some(now.to_owned()),
            remind_at: approval
                .remind_after
                .map(|after| later_by(now, after.seconds())),
            reminded_at: None,
            expires_at: approval
                .expires_after
                .map(|after| later_by(now, after.seconds())),
            on_expiry: approval.expiry().map(|(_, on)| on),
        });
    } else {
        judgement.seconds = advance(&mut next, session, plan.outputs, pinned, now);
    }
    next.last_change = Some(fingerprint);
    next.seq += 1;
    next.updated_at = now.to_owned();
    (next, judgement)
}

/// The refusal of a tool call that would move a session waiting for sign-off.
pub(crate) fn awaiting_approval(session: &Session) -> Failure {
    let step = session.approval.as_ref().map(|p| p.step.as_str());
    Failure::new(
        Code::AwaitingApproval,
        "this step waits for sign-off; no tool call can advance it. Tell the participant who may \
         approve it, and call rimthan.get_active_step later to see the decision",
    )
    .with("step", step)
}

/// The refusal of a tool call on a session a sign-off or a deadline ended.
pub(crate) fn expired(session: &Session) -> Failure {
    Failure::new(
        Code::SessionExpired,
        "this session ended when its sign-off or deadline expired; tell the participant, and \
         start a new session to do the work again",
    )
    .with("session_id", session.id.as_str())
}

/// An approver's decision (approve, send back, waive) on a session waiting for sign-off: the
/// session after it and what its audit entry records, or the refusal. The checkpoint does not
/// move: the participant's harness reads the decision with `rimthan.get_active_step`.
pub(crate) fn decided(
    pinned: &Pinned<'_>,
    session: &Session,
    req: &DecisionRequest,
    approver: &Approver,
    now: &str,
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
    let mut next = session.clone();
    let mut record = AuditDecision {
        step: req.step.to_string(),
        asserted: approver.identity == Identity::Asserted,
        ..AuditDecision::default()
    };
    let subject = &approver.principal.subject;
    let mine = |p: &PendingApproval| p.approvals.iter().any(|a| &a.subject == subject);
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
            pending.approvals.push(Signoff {
                subject: subject.clone(),
                organization: approver.principal.organization.clone(),
                basis: Some(basis),
                authenticated: approver.identity == Identity::Verified,
                at: now.to_owned(),
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
                advance(&mut next, session, pending.outputs, pinned, now);
            }
        }
        Decision::SendBack { note: text } => {
            let text = note(Some(text), true, "note saying what to change")?
                .expect("a required note is present");
            record.note = Some(text.clone());
            // The round's texts stay, for the approver to read the next round against.
            if let Some(sent_back) = next.approval.take() {
                next.sent_back_texts.insert(sent_back.step, sent_back.texts);
            }
            next.status = Status::Revise;
            next.revise_rounds += 1;
            next.findings = vec![server_finding(format!("Sent back by {subject}: {text}"))];
            next.deadline = deadline_of(pinned.workflow, next.step_index, now);
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
                authenticated: approver.identity == Identity::Verified,
                reason: reason.clone(),
                at: now.to_owned(),
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
    next.updated_at = now.to_owned();
    Ok((next, record))
}

/// Moves `next` past its active step with `outputs` accepted: to the next step, or completed.
/// Returns the seconds the step took, when its entry time is known.
fn advance(
    next: &mut Session,
    session: &Session,
    outputs: BTreeMap<String, AcceptedArtifact>,
    pinned: &Pinned<'_>,
    now: &str,
) -> Option<u64> {
    let entered = match (&session.step_entered_at, session.step_index) {
        (Some(at), _) => Some(at.as_str()),
        (None, 0) => Some(session.created_at.as_str()),
        (None, _) => None,
    };
    next.step_entered_at = Some(now.to_owned());
    next.ledger.extend(outputs);
    next.step_index += 1;
    next.status = if next.step_index == pinned.workflow.steps().len() {
        Status::Completed
    } else {
        Status::Active
    };
    next.deadline = deadline_of(pinned.workflow, next.step_index, now);
    next.findings.clear();
    entered.and_then(|at| seconds_between(at, now))
}

/// The deadline of step `index` of `workflow` entered at `now`, if it declares one.
pub(crate) fn deadline_of(workflow: &Workflow, index: usize, now: &str) -> Option<Deadline> {
    let step = workflow.steps().get(index)?;
    let (after, on_expiry) = step.doc().deadline()?;
    Some(Deadline {
        step: step.doc().id.to_string(),
        at: later_by(now, after.seconds()),
        on_expiry,
    })
}

/// A finding the server itself gives (a send-back, an expiry): no validator, check or place.
pub(crate) fn server_finding(message: String) -> Finding {
    Finding {
        validator_id: String::new(),
        check_id: None,
        rule: None,
        line: None,
        severity: Severity::Error,
        message,
        path: None,
        pointer: None,
        help: None,
    }
}

/// The findings of the failed checks, each located at its path and line. A check's findings
/// were bounded when it ran.
fn check_findings(failed: &[&CheckRecord]) -> Vec<Finding> {
    failed
        .iter()
        .flat_map(|c| {
            c.findings.iter().map(|f| Finding {
                validator_id: String::new(),
                check_id: Some(c.id.clone()),
                rule: Some(f.rule.clone()),
                line: f.line,
                severity: f.severity,
                message: f.message.clone(),
                path: f.path.clone(),
                pointer: None,
                help: f.help.clone(),
            })
        })
        .collect()
}

fn findings_of(failing: &[&Report]) -> Vec<Finding> {
    failing
        .iter()
        .flat_map(|r| {
            let listed = r.findings.iter().map(|f| Finding {
                validator_id: r.validator_id.clone(),
                check_id: None,
                rule: None,
                line: None,
                severity: f.severity,
                message: f.message.clone(),
                path: f.path.clone(),
                pointer: f.pointer.clone(),
                help: None,
            });
            let summary = r.findings.is_empty().then(|| Finding {
                validator_id: r.validator_id.clone(),
                check_id: None,
                rule: None,
                line: None,
                severity: Severity::Error,
                message: r.summary.clone(),
                path: None,
                pointer: None,
                help: None,
            });
            listed.chain(summary).collect::<Vec<_>>()
        })
        .collect()
}
