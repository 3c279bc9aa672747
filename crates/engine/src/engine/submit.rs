//! `rimthan.submit_step_reports`: check the report set against the pending plan, then advance,
//! ask for a revision, or complete.

use std::collections::BTreeMap;

use super::{ChangeCall, Decision, Engine, Evidence};
use crate::{
    error::EngineError,
    model::approval::PendingApproval,
    model::audit::{Judgement, Operation, Outcome},
    model::checks::CheckRecord,
    model::codes::{Code, Failure},
    model::payload::SERVER_NAME,
    model::payload::StepResult,
    model::request::{Report, SubmitRequest, Verdict},
    model::session::{
        AcceptedArtifact, ChangeTool, Finding, Principal, Session, Status, now_rfc3339,
        seconds_between,
    },
    rules::reports::check_reports,
    rules::view::Pinned,
};

const TOOL: Operation = Operation::SubmitStepReports;

impl Engine {
    /// `rimthan.submit_step_reports`.
    pub async fn submit(
        &self,
        req: SubmitRequest,
        principal: Option<&Principal>,
    ) -> Result<StepResult, EngineError> {
        let evidence = Evidence::of_reports(&req);
        let change = Evidence::change(ChangeTool::Submit, &req);
        let call = ChangeCall {
            tool: TOOL,
            checkpoint: &req.checkpoint,
            principal,
            evidence,
            change: &change,
        };
        let refuse = |session: &Session, failures| {
            let (rejected, audit) =
                self.rejection(TOOL, Some(session), failures, principal, evidence);
            Ok(Decision::Answer(StepResult::Rejected(rejected), audit))
        };
        let result = self.change(call, StepResult::Rejected, |session, release| {
            let pinned = Pinned::resolve(release, session, &self.policies)?;
            if session.last_change.as_ref() == Some(&change) {
                let payload = pinned.active_payload(session, &self.key, SERVER_NAME);
                let audit = self.audit(TOOL, Some(session), Outcome::Replayed, principal);
                return Ok(Decision::Answer(StepResult::Active(Box::new(payload)), audit));
            }
            if session.status == Status::AwaitingApproval {
                return refuse(session, vec![super::prepare::awaiting_approval(session)]);
            }
            let plan = match &session.plan {
                Some(plan) if plan.id == req.validation_id => plan,
                _ => {
                    let failure = if session.retired_plans.contains(&req.validation_id) {
                        Failure::new(
                            Code::ValidationSuperseded,
                            "a newer validation plan replaced this one; submit against the latest plan",
                        )
                    } else {
                        Failure::new(
                            Code::ValidationNotFound,
                            "no validation plan with this id is pending; call rimthan.prepare_step_validation",
                        )
                    };
                    let failure = failure.with("validation_id", &req.validation_id);
                    return refuse(session, vec![failure]);
                }
            };
            let validators = pinned.planned(session, plan)?;
            let failures = check_reports(&pinned, session, plan, &validators, &req.reports);
            if !failures.is_empty() {
                return refuse(session, failures);
            }
            let mut next = session.clone();
            let plan = plan.clone();
            next.plan = None;
            next.retire(plan.id.clone());
            next.reports.insert(plan.step.clone(), req.reports.clone());
            let failing: Vec<_> = req
                .reports
                .iter()
                .filter(|r| r.verdict == Verdict::Fail)
                .collect();
            let now = now_rfc3339();
            next.record_round(&plan.step, &now, &req.reports, &plan.checks);
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
            } else if approval.is_some() {
                next.status = Status::AwaitingApproval;
                next.findings.clear();
                next.approval = Some(PendingApproval {
                    step: plan.step.clone(),
                    outputs: plan.outputs,
                    waivable: check_findings(&failed_checks)
                        .into_iter()
                        .filter(|f| f.severity == "error")
                        .collect(),
                    approvals: Vec::new(),
                    waivers: Vec::new(),
                });
            } else {
                judgement.seconds = advance(&mut next, session, plan.outputs, &pinned, &now);
            }
            next.last_change = Some(change.clone());
            next.seq += 1;
            next.updated_at = now;
            let answer = StepResult::Active(Box::new(pinned.active_payload(
                &next,
                &self.key,
                SERVER_NAME,
            )));
            let mut audit = self.audit(TOOL, Some(&next), next.status.into(), principal);
            audit.judgement = Some(judgement);
            evidence.apply(&mut audit);
            Ok(Decision::Change {
                next: Box::new(next),
                audit,
                answer,
            })
        })
        .await?;
        // The completing answer carries the statement, signed over the audit entry the
        // completion committed (so it is built only once that is stored).
        Ok(match result {
            StepResult::Active(payload) => StepResult::Active(self.with_provenance(payload).await?),
            other => other,
        })
    }
}

/// Moves `next` past its active step with `outputs` accepted: to the next step, or completed.
/// Returns the seconds the step took, when its entry time is known.
pub(super) fn advance(
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
    next.findings.clear();
    entered.and_then(|at| seconds_between(at, now))
}

/// The findings of the failed checks, each located at its path and line. A check's findings
/// were bounded when it ran.
pub(super) fn check_findings(failed: &[&CheckRecord]) -> Vec<Finding> {
    failed
        .iter()
        .flat_map(|c| {
            c.findings.iter().map(|f| Finding {
                validator_id: String::new(),
                check_id: Some(c.id.clone()),
                rule: Some(f.rule.clone()),
                line: f.line,
                severity: f.severity.clone(),
                message: f.message.clone(),
                path: f.path.clone(),
                pointer: None,
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
                severity: serde_json::to_value(f.severity)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default(),
                message: f.message.clone(),
                path: f.path.clone(),
                pointer: f.pointer.clone(),
            });
            let summary = r.findings.is_empty().then(|| Finding {
                validator_id: r.validator_id.clone(),
                check_id: None,
                rule: None,
                line: None,
                severity: "error".into(),
                message: r.summary.clone(),
                path: None,
                pointer: None,
            });
            listed.chain(summary).collect::<Vec<_>>()
        })
        .collect()
}
